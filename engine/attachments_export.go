package engine

import (
	"github.com/marlowe-bot/marlowe/core"
)

// exportFiles puts what the model saw of a person's shared files (the
// extracted text, transcripts, notes, image hashes) on their messages in
// `export my data`, following one pass over a channel's journal.
type exportFiles struct {
	at   map[string]int      // the person's message.received id → its index in the export
	n    map[string]int      // any message.received id → files it declared
	reqs map[string][]string // read_attachments tool.requested id → the messages read
}

func newExportFiles() *exportFiles {
	return &exportFiles{at: map[string]int{}, n: map[string]int{}, reqs: map[string][]string{}}
}

// see follows c; texts is the export's messages so far (a message of the
// person's is appended right after see returns).
func (f *exportFiles) see(c core.Command, person string, texts []exportMessage) {
	if c.Redacted() {
		return
	}
	switch c.Kind() {
	case core.KindMessageReceived:
		p, err := core.Decode[*core.MessageReceived](c)
		if err != nil || len(p.Attachments) == 0 {
			return
		}
		f.n[c.ID()] = len(p.Attachments)
		if c.Actor().ID == person {
			f.at[c.ID()] = len(texts)
		}
	case core.KindToolRequested:
		if p, err := core.Decode[*core.ToolRequested](c); err == nil && len(p.ReadAttachments) > 0 {
			f.reqs[c.ID()] = p.ReadAttachments
		}
	case core.KindToolCompleted:
		ids, ok := f.reqs[c.Cause()]
		if !ok {
			return
		}
		p, err := core.Decode[*core.ToolCompleted](c)
		if err != nil {
			return
		}
		i := 0
		for _, id := range ids {
			n := min(f.n[id], len(p.Attachments)-i)
			if n <= 0 {
				continue
			}
			if at, mine := f.at[id]; mine && at < len(texts) {
				texts[at].Files = append(texts[at].Files, p.Attachments[i:i+n]...)
			}
			i += n
		}
	}
}
