package sandbox

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// record is one line of the data file: the header (epoch) or a message's
// state after a change. The last line of a message wins.
type record struct {
	Epoch string   `json:"epoch,omitempty"`
	Msg   *message `json:"msg,omitempty"`
}

// load reads the data file, if there is one. A line that does not parse (a
// write cut short by a crash) is skipped with a warning.
func (s *Sandbox) load() error {
	f, err := os.Open(s.dataFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sandbox: open data file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	bad := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(line, &r); err != nil || (r.Msg == nil && r.Epoch == "") || (r.Msg != nil && r.Msg.ID == "") {
			bad++
			continue
		}
		if r.Epoch != "" {
			s.epoch = r.Epoch
		}
		if m := r.Msg; m != nil {
			s.msgs[m.ID] = m
			s.seq = max(s.seq, m.Rev)
			if micro, ok := idMicros(m.ID); ok {
				s.lastMicro = max(s.lastMicro, micro)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("sandbox: read data file: %w", err)
	}
	if bad > 0 {
		s.log.Warn("sandbox: skipped unreadable lines in data file", "file", s.dataFile, "lines", bad)
	}
	pending := make([]string, 0)
	for id, m := range s.msgs {
		if m.Key != "" {
			s.keys[m.Key] = id
		}
		if m.State == statePending {
			pending = append(pending, id)
		}
	}
	slices.Sort(pending)
	for _, id := range pending {
		s.queue = append(s.queue, inbound{msgID: id})
	}
	return nil
}

// idMicros reads the time part back out of a message id.
func idMicros(id string) (int64, bool) {
	sec, frac, ok := strings.Cut(id, ".")
	if !ok {
		return 0, false
	}
	a, err1 := strconv.ParseInt(sec, 10, 64)
	b, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return a*1e6 + b, true
}

// compact rewrites the data file as the header plus each message's latest
// state, in revision order, atomically.
func (s *Sandbox) compact() error {
	if err := os.MkdirAll(filepath.Dir(s.dataFile), 0o700); err != nil {
		return fmt.Errorf("sandbox: data dir: %w", err)
	}
	ms := make([]*message, 0, len(s.msgs))
	for _, m := range s.msgs {
		if m.To == "" {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b *message) int { return cmp.Compare(a.Rev, b.Rev) })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(record{Epoch: s.epoch}); err != nil {
		return fmt.Errorf("sandbox: encode header: %w", err)
	}
	for _, m := range ms {
		if err := enc.Encode(record{Msg: stored(m)}); err != nil {
			return fmt.Errorf("sandbox: encode message %s: %w", m.ID, err)
		}
	}
	tmp := s.dataFile + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("sandbox: write data file: %w", err)
	}
	if err := os.Rename(tmp, s.dataFile); err != nil {
		return fmt.Errorf("sandbox: replace data file: %w", err)
	}
	s.appended, s.compacted = 0, buf.Len()
	return nil
}

// stored is m as the data file keeps it: without the clicks in flight,
// which a restart does not keep (the queue is in memory).
func stored(m *message) *message {
	if m.Clicking == nil {
		return m
	}
	c := *m
	c.Clicking = nil
	return &c
}

// appendLocked appends a message's new state to the data file; ephemeral
// messages are not kept.
func (s *Sandbox) appendLocked(m *message) error {
	if s.dataFile == "" || m.To != "" {
		return nil
	}
	line, err := json.Marshal(record{Msg: stored(m)})
	if err != nil {
		return fmt.Errorf("sandbox: encode message %s: %w", m.ID, err)
	}
	f, err := os.OpenFile(s.dataFile, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sandbox: open data file: %w", err)
	}
	s.appended += len(line) + 1
	if _, err := f.Write(append(line, '\n')); err != nil {
		_ = f.Close()
		return fmt.Errorf("sandbox: append to data file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sandbox: close data file: %w", err)
	}
	return nil
}

// compactAfter is how many bytes, at least, appended to the data file make
// it worth compacting while running: a streamed answer appends its whole
// text so far at every step, so without it the file would grow with the
// square of the answers' length until the next start.
const compactAfter = 4 << 20

// compactIfLongLocked compacts the data file once the bytes appended since
// the last compaction exceed compactAfter and twice what the compacted file
// held (so the cost per appended byte stays constant). A failure is
// logged: the appended file is still whole.
func (s *Sandbox) compactIfLongLocked() {
	if s.dataFile == "" || s.appended < max(compactAfter, 2*s.compacted) {
		return
	}
	if err := s.compact(); err != nil {
		s.appended = 0 // try again after as many bytes, not at every line
		s.log.Error("sandbox: compact data file", "file", s.dataFile, "err", err)
	}
}
