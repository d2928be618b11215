package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// `export my data` (docs/privacy.md): what `what do you know about me`
// lists, with the texts of the person's kept messages, as one JSON file:
// uploaded to their DM when the surface takes files (core.FileUploader),
// else a link to the bot's HTTP address (Config.ExportURL) signed with an
// HMAC of (platform, user, expiry) that the handler in cmd/bot checks
// before serving (VerifyExportLink).

// exportLinkTTL is how long an export link works.
const exportLinkTTL = 15 * time.Minute

// Export is the JSON file `export my data` produces.
type Export struct {
	Platform   string          `json:"platform"`
	User       string          `json:"user"`
	ExportedAt time.Time       `json:"exported_at"`
	Channels   []exportChannel `json:"channels"`
	// Connections are the servers the person signed in to so that Marlowe
	// acts there as them: which and when, never a token.
	Connections []core.Connection `json:"connections,omitempty"`
	// WithheldNotes counts notes by others that mention the person in
	// rooms they cannot read now or in other people's DMs: no text, no
	// author, no room (aboutmereach.go).
	WithheldNotes int `json:"withheld_notes,omitempty"`
}

type exportChannel struct {
	Channel   string           `json:"channel"` // the channel key
	Memories  []exportMemory   `json:"memories,omitempty"`
	Messages  []exportMessage  `json:"messages,omitempty"`
	Consents  []exportConsent  `json:"consents,omitempty"`
	Routines  []exportRoutine  `json:"routines,omitempty"`
	Approvals []exportApproval `json:"pending_approvals,omitempty"`
}

type exportMemory struct {
	ID     string    `json:"id"`
	Text   string    `json:"text"`
	At     time.Time `json:"at"`
	Yours  bool      `json:"yours"` // added by you (else it mentions you)
	Author string    `json:"author,omitempty"`
}

type exportMessage struct {
	ID     string    `json:"id"`
	At     time.Time `json:"at"`
	Thread string    `json:"thread,omitempty"`
	Text   string    `json:"text"`
	// Files is what the model saw of the files shared with it
	// (attachments_export.go).
	Files []core.AttachmentSeen `json:"files,omitempty"`
}

type exportConsent struct {
	ID          string `json:"id"`
	Tool        string `json:"tool"`
	Destination string `json:"destination,omitempty"`
}

type exportRoutine struct {
	ID          string `json:"id"`
	Instruction string `json:"instruction"`
}

type exportApproval struct {
	ID   string `json:"id"`
	Tool string `json:"tool"`
	You  string `json:"you"` // asked | may decide
}

// ExportData is person's export on platform, as JSON.
func (e *Engine) ExportData(ctx context.Context, platform, user string) ([]byte, error) {
	chans, err := e.aboutMe(ctx, platform, core.Person{ID: user})
	if err != nil {
		return nil, err
	}
	out := Export{Platform: platform, User: user, ExportedAt: e.now().UTC(), Channels: []exportChannel{}}
	for _, ac := range chans {
		out.WithheldNotes += ac.withheld
		ec := ac.exp
		ec.Channel = string(ac.sc.Key())
		ec.Messages = ac.texts
		for _, m := range ac.memories {
			ec.Memories = append(ec.Memories, exportMemory{ID: m.ID, Text: m.Text, At: m.At.UTC(), Yours: m.Author() == user, Author: m.Author()})
		}
		if len(ec.Memories)+len(ec.Messages)+len(ec.Consents)+len(ec.Routines)+len(ec.Approvals) > 0 {
			out.Channels = append(out.Channels, ec)
		}
	}
	if e.cfg.Connections != nil {
		if out.Connections, err = e.cfg.Connections.List(ctx, platform, user); err != nil {
			return nil, fmt.Errorf("export connections: %w", err)
		}
	}
	return json.MarshalIndent(out, "", "  ")
}

// exportCommand answers `export my data` for h, in their DM.
func (d *driver) exportCommand(ctx context.Context, h *humanMsg) (core.Reply, error) {
	rs, e := d.rs, d.e
	reply := func(s string) core.Reply { return core.Reply{Text: s, Provider: "grammar"} }
	if !h.dm {
		return reply("I do that only in a direct message: say `export my data` to me there."), nil
	}
	if up, ok := d.s.(core.FileUploader); ok {
		data, err := e.ExportData(ctx, rs.Scope.Platform, h.author.ID)
		if err != nil {
			return core.Reply{}, err
		}
		f := core.File{Name: "marlowe-export-" + h.author.ID + ".json", Title: "What Marlowe keeps about you", Type: "application/json", Content: data}
		err = up.UploadFile(ctx, rs.Scope, f)
		if err == nil {
			return reply("📦 Here is everything I keep about you, as JSON (" + f.Name + "): the notes you added, the notes that mention you in rooms you can read, your kept messages, consents, routines and pending approvals."), nil
		}
		// A refused upload (for example a Slack app installed before it
		// asked for files:write) falls back to the link when there is one.
		e.log.WarnContext(ctx, "export upload failed", "user", h.author.ID, "error", err)
		if e.cfg.ExportURL == "" {
			return reply("I couldn't upload the file here (the bot's log says why), and no download address is configured (the operator sets MARLOWE_PUBLIC_URL). `what do you know about me` lists what I keep."), nil
		}
	}
	if e.cfg.ExportURL == "" {
		return reply("This platform does not take files from me and no download address is configured (the operator sets MARLOWE_PUBLIC_URL), so I can't export your data here. `what do you know about me` lists it."), nil
	}
	link, err := e.StoreExport(ctx, rs.Scope.Platform, h.author.ID)
	if err != nil {
		return core.Reply{}, err
	}
	return reply("📦 Download everything I keep about you, as JSON, within 15 minutes (anyone with the link can open it until then): " + link), nil
}

// exportMAC signs (platform, user, archive id, expiry) with a key derived
// from the card key for export links alone, so a card token and an export
// link can never stand for each other.
func (e *Engine) exportMAC(platform, user, id string, exp int64) string {
	k := hmac.New(sha256.New, e.cfg.CardKey)
	k.Write([]byte("marlowe-export-link-key"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte("marlowe-export\x00" + platform + "\x00" + user + "\x00" + id + "\x00" + strconv.FormatInt(exp, 10)))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ExportLink is a link to user's stored export id on platform ("" with no
// export store: built when fetched), valid until exp.
func (e *Engine) ExportLink(platform, user, id string, exp time.Time) string {
	q := url.Values{"p": {platform}, "u": {user}, "exp": {strconv.FormatInt(exp.Unix(), 10)}}
	if id != "" {
		q.Set("id", id)
	}
	q.Set("sig", e.exportMAC(platform, user, id, exp.Unix()))
	return strings.TrimRight(e.cfg.ExportURL, "/") + "/export?" + q.Encode()
}

// ErrBadExportLink is a link whose signature does not verify.
var ErrBadExportLink = errors.New("export link is not valid")

// ErrExportExpired is a genuine link past its expiry; errors.Is it
// core.ErrExportGone too.
var ErrExportExpired = fmt.Errorf("export link expired: %w", core.ErrExportGone)

// VerifyExportLink checks an export link's query: its signature, then its
// expiry; it returns the platform, user and stored archive id it is for.
func (e *Engine) VerifyExportLink(q url.Values) (platform, user, id string, err error) {
	platform, user, id = q.Get("p"), q.Get("u"), q.Get("id")
	exp, perr := strconv.ParseInt(q.Get("exp"), 10, 64)
	if perr != nil || platform == "" || user == "" {
		return "", "", "", ErrBadExportLink
	}
	if !hmac.Equal([]byte(q.Get("sig")), []byte(e.exportMAC(platform, user, id, exp))) {
		return "", "", "", fmt.Errorf("%w: bad signature", ErrBadExportLink)
	}
	if !e.now().Before(time.Unix(exp, 0)) {
		return platform, user, id, ErrExportExpired
	}
	return platform, user, id, nil
}
