// Package sandbox is the local web workspace Marlowe serves when nothing
// else is configured: a Slack-like page on localhost with public channels
// (#general, #random), a private channel (#private-team), threads, a DM with
// the bot, and three simulated people (Alice, Bob, Carol) to switch between.
// It is a core.Surface like the Slack adapter and goes through the same path:
// people's messages and card clicks are normalised to core.Inbound and handed
// to deliver (the engine, which runs the intent filter and journals); the
// bot's posts, edits, reactions and cards come back through Post, Update and
// React, keyed by the effect's idempotency key.
//
// # Wiring
//
//	sb, err := sandbox.New(sandbox.Config{
//		Addr:     getenv("MARLOWE_SANDBOX_ADDR"), // default 127.0.0.1:8080
//		DataFile: filepath.Join(dataDir, "sandbox.jsonl"),
//		Logger:   log,
//	})
//	url, err := sb.Listen(ctx) // bind early, log the URL
//	eng, err := engine.New(engine.Config{Router: router, ...}) // router: below
//	err = sb.Run(ctx, engine.Deliver)
//
// Listen binds the address (loopback unless the address names another host
// explicitly: ":8080" binds 127.0.0.1:8080, "0.0.0.0:8080" binds every
// interface and logs a warning, because the sandbox has no authentication).
// Whatever the address, only loopback Host names and Config.Hosts
// (MARLOWE_SANDBOX_HOSTS) are served, so a page whose name rebinds to this
// address cannot reach the workspace.
// Run serves HTTP until ctx ends and returns once every goroutine it started,
// live event streams included, has finished. Handler returns the same
// routes for mounting elsewhere (at the root: the page uses absolute paths).
//
// # Why did the bot answer? (Decided)
//
// Each person's message in the workspace shows whether the bot routed or
// ignored it, and why (the intent filter's reason: mention, thread-window,
// no-window, ...). core.Surface's deliver returns only an error, so the
// decision comes back on a side channel: Sandbox.Decided(ev, route, reason).
// The composition root calls it from the router it gives the engine, so the
// page shows exactly the decision the engine acted on, made once (no second
// window read, no double count in the filter's metrics):
//
//	router := core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
//		d, err := filter.Decide(ctx, ev) // *intent.Filter
//		if err != nil {
//			return false, "", err
//		}
//		sb.Decided(ev, d.Route, d.Reason.String()) // no-op for other platforms
//		return d.Route, d.Reason.String(), nil
//	})
//
// Without it the indicator only says the message was delivered. The test
// helper engineDeliver (engine_test.go) is a complete wiring: journal,
// router, window observer, scripted model and a tool that needs approval.
//
// # Mentions
//
// The page's composer offers people, the bot, the @eng group and the
// broadcasts (@here, @channel, @everyone) when you type "@", and, like
// Slack's client, sends a picked or typed @Name as a real token: <@alice>
// for a user, <!subteam^eng> for a group, <!here> for a broadcast. The
// server resolves tokens to ids (core.Event.Mentions, MentionsBot) and
// never matches a name; neither does the engine. The
// bot's own token is stripped from the start of Text. The bot may use the
// same tokens in its posts and they render as mentions.
//
// # Live updates
//
// Every change to a message (post, edit, reaction, card state, routing
// decision) gives the message a new revision from one monotonic counter and
// is pushed over Server-Sent Events (GET /api/events) as the message's full
// state with the revision as the event id. A client that reconnects with
// Last-Event-ID receives the current state of every message changed since,
// in revision order, each once. A "hello" event carries the workspace epoch:
// when it changes (an in-memory sandbox restarted) the page starts over.
//
// # Runs as streams
//
// The sandbox implements core.Streamer, so a run in a thread shows as
// Slack's agent surface shows it: one message with a plan (a title, one
// task per plan item and tool step, each with its state) and the answer
// streamed into it (stream.go, docs/sandbox.md). A stream is a message like
// any other: keyed like Post, persisted, found again by its key after a
// restart. Config.NoStream (MARLOWE_SANDBOX_STREAM=0) keeps the checklist
// message edited in place instead. Typing (core.Typing) shows "Marlowe is
// thinking…" under the conversation for a few seconds (typing.go).
//
// # Clicks and ephemeral messages
//
// A click is per person, as on a real platform: while it is queued or
// being delivered, the card's Clicking lists the clicker, whose page
// disables their buttons only, and a second click of theirs is refused
// (409). When deliver returns they can click again: a refused click leaves
// the card usable; an accepted one is followed by the card's resolution.
// PostEphemeral (core.Ephemeral) posts a message only one person sees: it
// is sent to every page, which shows it to that person alone ("Only
// visible to you"), and it is not in History, not persisted, gone after a
// restart, like Slack's. A click that could not be delivered is told to
// the clicker that way.
//
// Message text is rendered by static/markdown.js: code spans and blocks
// verbatim, then mention tokens, *bold*, _italic_, ~strike~, task boxes and
// bullets.
//
// # Persistence
//
// With Config.DataFile set, every change is appended to a JSON-lines file
// and the file is compacted on start, so a restart keeps the conversation,
// the idempotency keys and the event counter. A person's message that was
// stored but not yet delivered (the process stopped first) is delivered
// again by the next Run. Card clicks are not persisted: a click lost to a
// crash is clicked again.
//
// # Privacy
//
// The sandbox never logs message text.
package sandbox
