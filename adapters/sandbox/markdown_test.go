package sandbox

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestMarkdown runs the page's renderer (static/markdown.js, the file the
// page loads) in headless Chromium on a table of texts: code spans and
// blocks are verbatim (a cron spec keeps its asterisks), emphasis needs
// its markers to hug a word, mention tokens are resolved outside code only,
// and everything is escaped.
func TestMarkdown(t *testing.T) {
	chrome := chromium(t)
	src, err := static.ReadFile("static/markdown.js")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ in, want string }{
		{"`0 9 * * 1-5`", "<code>0 9 * * 1-5</code>"},
		{"routine add `0 9 * * 1-5` tz Europe/Paris: morning digest", "routine add <code>0 9 * * 1-5</code> tz Europe/Paris: morning digest"},
		{"next: `0 9 * * 1-5` and `@every 30m`", "next: <code>0 9 * * 1-5</code> and <code>@every 30m</code>"},
		{"spec 0 9 * * 1-5 in plain text", "spec 0 9 * * 1-5 in plain text"},
		{"`*not bold*` and `_not italic_`", "<code>*not bold*</code> and <code>_not italic_</code>"},
		{"*Runs finished (2)*", "<b>Runs finished (2)</b>"},
		{"Release 1.4: **12 of 14** issues", "Release 1.4: <b>12 of 14</b> issues"},
		{"it is *really* done.", "it is <b>really</b> done."},
		{"*bold with `code` inside*", "<b>bold with <code>code</code> inside</b>"},
		{"_soon_, ~old~", "<i>soon</i>, <s>old</s>"},
		{"a * b * c, 2 * 3 = 6", "a * b * c, 2 * 3 = 6"},
		{"snake_case_name and file_v2_final", "snake_case_name and file_v2_final"},
		{"** not bold **", "** not bold **"},
		{"<@bob> *please* look", "[@bob] <b>please</b> look"},
		{"`<@bob>` stays literal", "<code>&lt;@bob&gt;</code> stays literal"},
		{"ask <!subteam^eng> or <#general>", "ask [!subteam^eng] or [#general]"},
		{"```\nx * y * z\n<b>\n```", "<pre><code>x * y * z\n&lt;b&gt;</code></pre>"},
		{"<script>alert('x')</script> & co", "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co"},
		{"- [x] fetched\n- [ ] summarise\n- plain", `<span class="check">✓</span> fetched` + "\n" + `<span class="todo">○</span> summarise` + "\n• plain"},
		{"stray \u0001" + "0\u0002 markers", "stray 0 markers"},
		// Links are clickable (the export link), nothing inside them is
		// emphasis, trailing punctuation stays outside; in code they stay text.
		{"download: https://bot.example/export?exp=1&p=sandbox&u=alice_b.", `download: <a href="https://bot.example/export?exp=1&amp;p=sandbox&amp;u=alice_b" target="_blank" rel="noopener noreferrer">https://bot.example/export?exp=1&amp;p=sandbox&amp;u=alice_b</a>.`},
		{"(see http://localhost:8080/x_y_z)", `(see <a href="http://localhost:8080/x_y_z" target="_blank" rel="noopener noreferrer">http://localhost:8080/x_y_z</a>)`},
		{"`https://in.code/x` stays code", "<code>https://in.code/x</code> stays code"},
	}
	ins := make([]string, len(cases))
	for i, c := range cases {
		ins[i] = c.in
	}
	in, err := json.Marshal(ins)
	if err != nil {
		t.Fatal(err)
	}
	br := startBrowser(t, chrome, 800, 600)
	js := fmt.Sprintf(`%s; (%s).map((s) => window.MarloweMarkdown.render(s, (b) => "[" + b + "]"))`, src, in)
	got, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]string](js))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(cases) {
		t.Fatalf("got %d results for %d cases", len(got), len(cases))
	}
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("render(%q)\n got %q\nwant %q", c.in, got[i], c.want)
		}
	}
	if errs := br.pageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}
