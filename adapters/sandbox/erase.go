package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.PlatformEraser = (*Sandbox)(nil)

// EraseTexts implements core.PlatformEraser: the sandbox is the platform,
// so its messages are the bot's to erase. Every message erases picks (the
// person's own, the bot's carrying a piece of texts in its text, card,
// plan, notice or file names; without an author every message carrying
// one), in channel or, when channel is "", anywhere, becomes core.ErasedText, with no card, plan or files; the
// files attached to it are deleted; the data file is then rewritten
// (compacted), so no earlier line keeps a copy. Pages are told at once.
func (s *Sandbox) EraseTexts(_ context.Context, channel, author string, texts *core.TextMatcher) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.msgs))
	for id := range s.msgs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var files []string
	var errs []error
	n := 0
	for _, id := range ids {
		m := s.msgs[id]
		if (channel != "" && m.Channel != channel) || erased(m) || !erases(m, author, texts) {
			continue
		}
		nm := *m
		for _, f := range nm.Files {
			files = append(files, f.ID)
		}
		nm.Text, nm.Card, nm.Stream, nm.Files, nm.Notice = core.ErasedText, nil, nil, nil, ""
		if err := s.commitLocked(&nm); err != nil {
			errs = append(errs, err)
		}
		n++
	}
	if err := s.files.remove(files); err != nil {
		errs = append(errs, err)
	}
	if n > 0 && s.dataFile != "" {
		if err := s.compact(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("sandbox: erase: %w", err)
	}
	return n, nil
}

// erases reports whether an erasure of author's texts (a person's forget
// me) or of texts alone (author "", a deleted note) erases m: the person's
// own messages, and the bot's that carry a piece of texts; without an
// author, every message that carries one. Other people's messages quoting
// a person are theirs and are kept, as in the journal.
func erases(m *message, author string, texts *core.TextMatcher) bool {
	switch {
	case author == "":
		return carries(m, texts)
	case m.Author == author && !m.Bot:
		return true
	}
	return m.Bot && carries(m, texts)
}

// erased reports whether m was erased already.
func erased(m *message) bool {
	return m.Text == core.ErasedText && m.Card == nil && m.Stream == nil && len(m.Files) == 0
}

// carries reports whether any text of m holds a piece of texts.
func carries(m *message, texts *core.TextMatcher) bool {
	if texts == nil || texts.Empty() {
		return false
	}
	strs := []string{m.Text, m.Notice}
	for _, f := range m.Files {
		strs = append(strs, f.Name)
	}
	if c := m.Card; c != nil {
		strs = append(strs, c.Title, c.Body, c.Resolution)
		for _, f := range c.Fields {
			strs = append(strs, f.Label, f.Value)
		}
	}
	if st := m.Stream; st != nil {
		strs = append(strs, st.Title)
		for _, t := range st.Tasks {
			strs = append(strs, t.Title, t.Output)
		}
	}
	return slices.ContainsFunc(strs, texts.MatchString)
}

// remove deletes the files ids, from memory and from disk.
func (fs *fileStore) remove(ids []string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var errs []error
	for _, id := range ids {
		delete(fs.mem, id)
		delete(fs.meta, id)
		if fs.dir == "" {
			continue
		}
		if err := os.Remove(filepath.Join(fs.dir, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("delete file %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
