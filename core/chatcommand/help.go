package chatcommand

const HelpText = "Here is what I understand without a model:\n" +
	"• `help` — this message\n" +
	"• `remember <something>` — keep a note for this channel\n" +
	"• `recall <words>` — find notes\n" +
	"• `memories` — list this channel's notes, newest first (`memories 2` for the next page)\n" +
	"• `forget <note id>` — drop a note from recall\n" +
	"• `delete memory <note id>` — destroy a note for good (the person who added it, or an admin)\n" +
	"• `status` — what I am working on or waiting for in this channel\n" +
	"• `approvals` — requests waiting for someone's approval in this channel\n" +
	"• `cancel` — in a thread: stop what I am doing there (the person who asked, or an admin)\n" +
	"• `policy` — show this channel's rules; admins: `policy set approvers U1,U2`, " +
	"`policy set admins U1`, `policy set tools a,b`, `policy set window thread 30m`, " +
	"`policy set window toplevel 6m`, `policy set budget 100000`, `policy set approval send,irreversible` " +
	"(or `+write` / `-send` to add or remove one level)\n" +
	"• `routine add <spec> [tz <zone>]: <instruction>`, `routines`, `routine pause|resume|delete|run <id>` — scheduled digests"

const NeedModelText = "I need a language model for that. Configure one with " +
	"`MARLOWE_MODEL_PROVIDER=openai` and `MARLOWE_MODEL_BASE_URL` pointing at any OpenAI-compatible " +
	"endpoint (for example a local Ollama: `http://localhost:11434/v1`, plus `MARLOWE_MODEL` for the model name). " +
	"Until then I understand `help`, `remember …`, `recall …`, `memories`, `forget …`, `delete memory …`, " +
	"`status`, `approvals`, `cancel` and `policy …`."

const PolicyUsageText = "Usage: `policy` (show), or `policy set <approvers|admins|tools|window|budget|approval> <value>` — " +
	"e.g. `policy set approvers U1,U2`, `policy set tools remember,recall`, `policy set window thread 30m`. " +
	"Use `none` / `default` to clear a setting."
