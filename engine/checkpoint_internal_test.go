package engine

import "testing"

// A large snapshot spaces checkpoints out, so a long channel's journal is
// not mostly copies of its fold.
func TestCheckpointIntervalGrowsWithTheSnapshot(t *testing.T) {
	for _, tc := range []struct {
		every, size int
		want        uint64
	}{
		{1000, 0, 1000},
		{1000, 100_000, 1000},
		{1000, 4_800_000, 9375},
		{50, 51_200, 100},
	} {
		ck := viewCheckpoint{cfg: &checkpointConfig{every: tc.every}, size: tc.size}
		if got := ck.interval(); got != tc.want {
			t.Errorf("every %d, snapshot %d bytes: interval %d, want %d", tc.every, tc.size, got, tc.want)
		}
	}
}
