package main

import (
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// share_file through a SIGKILL of the real binary, answering a mention in
// a Telegram group. The model asks to share a CSV; the process is killed
// at one of two points and restarted on the same database:
//   - mid-upload: Telegram took the sendDocument but its answer never came
//     back (held until the kill), so the upload is in doubt: the resumed run
//     does not upload again, and the model is told it may already be there;
//   - after the upload's record: the model's next call hangs and the kill
//     lands there; the resumed run finds the upload done.
//
// Either way Telegram has the file exactly once, and the run ends.
func TestShareFileExactlyOnceThroughSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot and SIGKILLs it (-short skips it)")
	}
	t.Parallel()
	const args = `{"name":"failed-zq4.csv","type":"text/csv","content":"order_id\n1017\n"}`
	tests := []struct {
		name string
		// arm sets the kill point; killNow says when the bot is at it.
		arm     func(tg *telegramfake.Server, model *llmtest.OpenAI)
		killNow func(tg *telegramfake.Server, model *llmtest.OpenAI) bool
		// inDoubt: the resumed run must tell the model the upload may exist.
		inDoubt bool
	}{
		{
			name: "mid-upload",
			arm: func(tg *telegramfake.Server, model *llmtest.OpenAI) {
				tg.HoldResponses("sendDocument", 1)
				model.Enqueue(llmtest.Tools(llmtest.Call("f1", "share_file", args)))
			},
			killNow: func(tg *telegramfake.Server, _ *llmtest.OpenAI) bool { return len(tg.Documents()) >= 1 },
			inDoubt: true,
		},
		{
			name: "after the upload's record",
			arm: func(_ *telegramfake.Server, model *llmtest.OpenAI) {
				model.Enqueue(llmtest.Tools(llmtest.Call("f1", "share_file", args)), llmtest.Hang())
			},
			killNow: func(tg *telegramfake.Server, model *llmtest.OpenAI) bool {
				return len(tg.Documents()) >= 1 && modelSaw(model, "Shared failed-zq4.csv")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := startTelegramCrash(t)
			tg, r, model := c.tg, c.r, c.model
			tc.arm(tg, model)
			tg.Inject(telegramfake.Incoming{Chat: trGroup, From: tgAlice, Text: "@" + tg.Config().Username + " share the failed orders as a file"})
			c.wait("the bot at the kill point", 60*time.Second, func() bool { return tc.killNow(tg, model) })
			r.kill()
			tg.HoldResponses("sendDocument", 0)

			r.start()
			c.wait("the restarted bot polling", qaStartTimeout, func() bool { return c.polling() >= 2 })
			c.wait("the answer after the restart", 120*time.Second, func() bool {
				return countSent(tg, func(s telegramfake.Sent) bool { return strings.Contains(s.Text, "The tool answered:") }) >= 1
			})
			waitRunsEnded(t, c.dbURL, r.logs.String)
			docs := tg.Documents()
			if len(docs) != 1 || docs[0].Name != "failed-zq4.csv" || string(docs[0].Content) != "order_id\n1017\n" {
				var names []string
				for _, d := range docs {
					names = append(names, d.Name)
				}
				t.Fatalf("Telegram has %d uploads %q, want exactly one failed-zq4.csv", len(docs), names)
			}
			if told := modelSaw(model, "not repeated"); told != tc.inDoubt {
				t.Errorf("model told the upload was in doubt: %v, want %v", told, tc.inDoubt)
			}
		})
	}
}

// modelSaw reports whether any chat request the model fake got holds s.
func modelSaw(model *llmtest.OpenAI, s string) bool {
	for _, q := range model.Requests() {
		if strings.Contains(string(q.Body), s) {
			return true
		}
	}
	return false
}
