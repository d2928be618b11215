package chatcommand

import "testing"

func TestWords(t *testing.T) {
	for spec, want := range map[string]string{
		"0 9 * * 1-5":  "every weekday at 09:00",
		"30 17 * * 5":  "every Friday at 17:30",
		"0 9,17 * * *": "every day at 09:00 and 17:00",
		"15 * * * *":   "every hour at :15",
		"0 8 1 * *":    "on day 1 of every month at 08:00",
		"@every 1h30m": "every 1h30m",
		"@daily":       "every day at 00:00",
		"0 9 * 1 *":    "on the cron schedule `0 9 * 1 *`",
	} {
		if got := Words(spec); got != want {
			t.Errorf("Words(%q) = %q, want %q", spec, got, want)
		}
	}
}

// What the card says can be typed back: words → spec → the same words.
func TestScheduleWordsRoundTrip(t *testing.T) {
	for _, spec := range []string{
		"0 9 * * 1-5", "30 17 * * 5", "30 17 * * 1,4", "0 9,17 * * *", "15 * * * *", "0 8 1 * *",
		"*/15 * * * *", "0 10 * * 0,6", "0 0 * * 0", "@every 1h30m", "@every 2h", "@hourly", "@daily", "@weekly",
		"45 7 * * *", "0 12 * * 2-4",
	} {
		words := Words(spec)
		back, err := ParseSchedule(words)
		if err != nil {
			t.Errorf("%q → %q: %v", spec, words, err)
			continue
		}
		if again := Words(back); again != words {
			t.Errorf("%q → %q → %q → %q", spec, words, back, again)
		}
	}
}

func TestParseScheduleWords(t *testing.T) {
	for in, want := range map[string]string{
		"every weekday at 09:00":                     "0 9 * * 1-5",
		"every day at 8am":                           "0 8 * * *",
		"every day at 8 pm":                          "0 20 * * *",
		"every monday and thursday at 17:30":         "30 17 * * 1,4",
		"Every Monday, Wednesday and Friday at 9:15": "15 9 * * 1,3,5",
		"every 2 hours":                              "@every 2h",
		"every 30 minutes":                           "*/30 * * * *",
		"every 45 minutes":                           "@every 45m",
		"hourly":                                     "@hourly",
		"daily at noon":                              "0 12 * * *",
		"daily at midnight":                          "0 0 * * *",
		"every weekend day at 10":                    "0 10 * * 0,6",
		"on mondays at 9am":                          "0 9 * * 1",
		"0 9 * * 1-5":                                "0 9 * * 1-5",
		"@every 30m":                                 "@every 30m",
		"@weekly":                                    "@weekly",
	} {
		got, err := ParseSchedule(in)
		if err != nil || got != want {
			t.Errorf("ParseSchedule(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "whenever", "every day at 25:00", "every day at 9:15 and 10:30", "every blursday at 9", "@every soon", "0 9 * *"} {
		if got, err := ParseSchedule(bad); err == nil {
			t.Errorf("ParseSchedule(%q) = %q, want an error", bad, got)
		}
	}
}
