package fold

import (
	"slices"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// maxFoldReports bounds the reports the fold keeps: the latest ones
// (enough for any inbox, which lists at most 50) and the ids of all, so a
// late retry of an old report files nothing.
const maxFoldReports = 200

// Report is a report as the channel's fold keeps it.
type Report struct {
	ID      string // the notice key
	CmdID   string // the report.filed command: what the Dismiss token names
	Owner   string
	Title   string
	Body    string
	Fields  []core.CardField
	Cause   string
	Where   core.Scope
	FiledAt time.Time
	// Set once dismissed (the first dismissal stands).
	Dismissed  bool
	By         core.Person
	At         time.Time
	DismissCmd string
}

// reportFold is the part of a channel's fold that holds its reports.
type reportFold struct {
	byID  map[string]*Report
	byCmd map[string]string // report.filed command id → report id
	order []string          // report ids in filing order, to bound byID
	filed map[string]struct{}
}

func newReportFold() reportFold {
	return reportFold{byID: map[string]*Report{}, byCmd: map[string]string{}, filed: map[string]struct{}{}}
}

func (f *reportFold) Known(id string) bool { _, ok := f.filed[id]; return ok }

func (f *reportFold) file(c core.Command, p *core.ReportFiled) {
	if f.Known(p.ReportID) {
		return // the first filing stands
	}
	f.filed[p.ReportID] = struct{}{}
	f.byID[p.ReportID] = &Report{ID: p.ReportID, CmdID: c.ID(), Owner: p.Owner, Title: p.Title, Body: p.Body,
		Fields: slices.Clone(p.Fields), Cause: p.Cause, Where: c.Scope(), FiledAt: c.At()}
	f.byCmd[c.ID()] = p.ReportID
	f.order = append(f.order, p.ReportID)
	if len(f.order) > maxFoldReports {
		old := f.byID[f.order[0]]
		delete(f.byID, old.ID)
		delete(f.byCmd, old.CmdID)
		f.order = f.order[1:]
	}
}

func (f *reportFold) dismiss(c core.Command, p *core.ReportDismissed) {
	if r := f.byID[p.ReportID]; r != nil && !r.Dismissed {
		r.Dismissed, r.By, r.At, r.DismissCmd = true, p.By, c.At(), c.ID()
	}
}
