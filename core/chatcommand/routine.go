package chatcommand

import (
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// Routine commands (ARCHITECTURE.md section 8) are typed by a person and
// arm directly. The grammar turns them into one call of the routine tool
// (registered by scheduler/), which re-reads the person's own message from
// the journal before acting: a model calling that tool cannot arm anything
// the person did not type word for word.

// RoutineToolName is the tool the grammar calls for routine commands.
const RoutineToolName = "routine"

// RoutineOp is one routine command.
type RoutineOp string

const (
	RoutineAdd    RoutineOp = "add"
	RoutineList   RoutineOp = "list"
	RoutinePause  RoutineOp = "pause"
	RoutineResume RoutineOp = "resume"
	RoutineDelete RoutineOp = "delete"
	RoutineRun    RoutineOp = "run"
	RoutineEdit   RoutineOp = "edit"
	RoutineUsage  RoutineOp = "usage" // a routine command that did not parse
)

// RoutineCommand is a parsed routine command.
type RoutineCommand struct {
	Op   RoutineOp
	Spec string // add, edit: cron spec, descriptor or "@every <d>" (edit: "" keeps it)
	// Schedule is the schedule as typed, when it is not Spec itself
	// ("every weekday at 09:00"): what `routines` shows.
	Schedule    string
	TZ          string // add: IANA zone ("" = UTC); edit: "" keeps it
	Instruction string // add; edit: "" keeps it
	ID          string // pause, resume, delete, run, edit
	// Problem says why a command is RoutineUsage when it can ("I can't
	// read the schedule …"), quoting what was typed.
	Problem string
}

// RoutineUsageText is the reply to a routine command that did not parse.
const RoutineUsageText = "Usage: `routine add <schedule> [tz <zone>]: <instruction>` " +
	"(schedule: words like `every weekday at 09:00`, `every day at 8am`, `every monday and thursday at 17:30`, " +
	"`every 2 hours`, `hourly`, `daily at noon`; 5-field cron like `0 9 * * 1-5`; `@daily` or `@every 30m`), " +
	"`routines` (list), `routine pause|resume|delete|run <id>`, " +
	"`routine edit <id> [<schedule>] [tz <zone>][: <instruction>]` (what you leave out stays)."

// ParseRoutine reads a mention-stripped message; ok is false when it
// is not a routine command at all (a known verb with bad arguments is a
// command: its answer is the usage).
func ParseRoutine(text string) (RoutineCommand, bool) {
	t := strings.TrimSpace(text)
	word, rest, _ := strings.Cut(t, " ")
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(strings.TrimRight(word, ":,")) {
	case "routines":
		if rest == "" || strings.EqualFold(rest, "list") {
			return RoutineCommand{Op: RoutineList}, true
		}
		return RoutineCommand{}, false
	case "routine":
	default:
		return RoutineCommand{}, false
	}
	if rest == "" {
		return RoutineCommand{Op: RoutineUsage}, true
	}
	verb, arg, _ := strings.Cut(rest, " ")
	arg = strings.TrimSpace(arg)
	switch op := RoutineOp(strings.ToLower(verb)); op {
	case RoutineList:
		if arg == "" {
			return RoutineCommand{Op: RoutineList}, true
		}
	case RoutinePause, RoutineResume, RoutineDelete, RoutineRun:
		if arg != "" && !strings.ContainsAny(arg, " \t\n") {
			return RoutineCommand{Op: op, ID: arg}, true
		}
	case RoutineAdd:
		// The schedule ends where its own grammar does: at the first ':'
		// that is not inside a time of day ("every weekday at 09:00: …").
		sep := separator(arg)
		if sep < 0 || strings.TrimSpace(arg[sep+1:]) == "" {
			return RoutineCommand{Op: RoutineUsage, Problem: "say what to do after a colon, e.g. `routine add " + ScheduleExample + ": post a digest`"}, true
		}
		c := RoutineCommand{Op: RoutineAdd, Instruction: strings.TrimSpace(arg[sep+1:])}
		typed, tz := splitZone(strings.Fields(arg[:sep]))
		spec, err := ParseSchedule(typed)
		if err != nil {
			return RoutineCommand{Op: RoutineUsage, Problem: err.Error()}, true
		}
		c.Spec, c.TZ, c.Schedule = spec, tz, typedWords(typed, spec)
		return c, true
	case RoutineEdit:
		// routine edit <id> [<schedule>] [tz <zone>][: <instruction>]
		sched, instr, colon := arg, "", false
		if sep := separator(arg); sep >= 0 {
			sched, instr, colon = arg[:sep], strings.TrimSpace(arg[sep+1:]), true
		}
		f := strings.Fields(sched)
		if len(f) == 0 || (colon && instr == "") {
			break
		}
		c := RoutineCommand{Op: RoutineEdit, ID: f[0], Instruction: instr}
		typed, tz := splitZone(f[1:])
		if typed != "" {
			spec, err := ParseSchedule(typed)
			if err != nil {
				return RoutineCommand{Op: RoutineUsage, Problem: err.Error()}, true
			}
			c.Spec, c.Schedule = spec, typedWords(typed, spec)
		}
		c.TZ = tz
		if c.Spec == "" && c.TZ == "" && c.Instruction == "" {
			break // nothing to change
		}
		return c, true
	default:
		// "routine maintenance is due…" is not a command: leave it to the
		// model (or the usual offline answer).
		return RoutineCommand{}, false
	}
	return RoutineCommand{Op: RoutineUsage}, true
}

// splitZone splits a trailing "tz <zone>" off a schedule's words.
// typedWords is the schedule as typed when it is not spec itself.
func typedWords(typed, spec string) string {
	if typed = strings.TrimSpace(typed); typed == spec {
		return ""
	}
	return core.Truncate(typed, 120)
}

func splitZone(f []string) (spec, tz string) {
	if n := len(f); n >= 2 && strings.EqualFold(f[n-2], "tz") {
		tz, f = f[n-1], f[:n-2]
	}
	return strings.Join(f, " "), tz
}

// StripLeadingMention removes the bot's mention token from the start of a
// message. Adapters deliver text with mention tokens in the <@ID> form (the
// Slack adapter already strips the bot's own); the bot is the addressee an
// adapter leaves out of Mentions, so a leading <@ID> or <@!ID> whose ID is
// not among the message's resolved mentions is the bot's, as is a leading
// "@handle" word (Telegram). Only one leading token is stripped.
func StripLeadingMention(text string, mentions []core.Mention) string {
	t := strings.TrimLeft(text, " \t\n")
	switch {
	case strings.HasPrefix(t, "<@"):
		end := strings.IndexByte(t, '>')
		if end < 0 {
			return text
		}
		id := strings.TrimPrefix(t[2:end], "!")
		if i := strings.IndexByte(id, '|'); i >= 0 {
			id = id[:i]
		}
		for _, m := range mentions {
			if m.Kind == core.MentionUser && m.ID == id {
				return text
			}
		}
		return strings.TrimLeft(strings.TrimPrefix(t[end+1:], ":"), " \t\n,")
	case strings.HasPrefix(t, "@") && len(t) > 1:
		end := strings.IndexAny(t, " \t\n:,")
		if end < 0 {
			return ""
		}
		return strings.TrimLeft(t[end:], " \t\n:,")
	}
	return text
}
