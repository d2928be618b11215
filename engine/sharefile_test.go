package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/tools"
)

// share_file through a crash after every append of the run: the file is
// uploaded at most once, exactly once when the crash came after the
// upload's record, and a crash between the attempt's record and the
// upload's record leaves it in doubt: not uploaded again, and the model
// is told so. Every run ends done.
func TestShareFileExactlyOnceThroughCrashes(t *testing.T) {
	sc := scenario{
		name:  "share a file",
		tools: func(*toolLog) []core.Tool { return []core.Tool{tools.ShareFile()} },
		model: func() *coretest.ScriptedModel {
			return coretest.NewScriptedModel(
				coretest.Calls(coretest.Call("a", "share_file", `{"name":"failed.csv","type":"text/csv","content":"order_id\n1017\n"}`)),
				coretest.Text("Here is the list of failed orders."),
			)
		},
		check: func(t *testing.T, w *crashWorld, log *toolLog) {
			if _, ok := w.s.Find("Here is the list of failed orders."); !ok {
				t.Error("no answer posted")
			}
		},
	}
	total := func() int {
		w, _ := newCrashWorld(t, sc)
		cj := coretest.NewCrashJournal(w.j, 0)
		e := w.engine(t, cj)
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		ev := crashEvent(w)
		sc.play(t, w, e, &ev, true)
		_ = e.Close()
		if up := w.s.Uploads(); len(up) != 1 || up[0].File.Name != "failed.csv" || up[0].Scope.Thread != "M1" {
			t.Fatalf("clean run uploads %+v", up)
		}
		return cj.Appends()
	}()
	inDoubt := 0
	for n := 1; n <= total; n++ {
		w, _ := newCrashWorld(t, sc)
		ctx, crash := context.WithCancel(context.Background())
		cj := coretest.NewCrashJournal(w.j, n)
		cj.OnCrash = crash
		e1 := w.engine(t, cj)
		if err := e1.Start(ctx); err != nil {
			t.Fatal(err)
		}
		ev := crashEvent(w)
		sc.play(t, w, e1, &ev, true)
		_ = e1.Close()
		crash()
		attempted, posted := false, false
		for _, c := range w.j.All(chanScope("C1").Key()) {
			switch c.Kind() {
			case core.KindMessageAttempted:
				attempted = true
			case core.KindMessagePosted:
				if p, _ := core.Decode[*core.MessagePosted](c); p != nil && strings.HasPrefix(p.MessageID, "file:") {
					posted = true
				}
			}
		}
		e2 := w.engine(t, w.j)
		if err := e2.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		delivered := false
		for _, c := range w.j.All(chanScope("C1").Key()) {
			delivered = delivered || c.Kind() == core.KindMessageReceived
		}
		sc.play(t, w, e2, &ev, !delivered)
		_ = e2.Close()
		ups := len(w.s.Uploads())
		switch {
		case ups > 1:
			t.Errorf("crash after append %d: uploaded %d times", n, ups)
		case posted && ups != 1:
			t.Errorf("crash after append %d: the upload was recorded but %d happened", n, ups)
		case !attempted && ups != 1:
			t.Errorf("crash after append %d (before any attempt): %d uploads after the restart", n, ups)
		}
		if attempted && !posted {
			inDoubt++
			done := false
			for _, c := range w.j.All(chanScope("C1").Key()) {
				if p, err := core.Decode[*core.ToolCompleted](c); c.Kind() == core.KindToolCompleted && err == nil && strings.Contains(p.Error, "not repeated") {
					done = true
				}
			}
			if !done && ups == 0 {
				t.Errorf("crash after append %d: in doubt, but the model was not told", n)
			}
		}
		checkRecovered(t, w, sc, &toolLog{})
	}
	if inDoubt == 0 {
		t.Error("no crash point fell between the attempt and the upload's record")
	}
}
