package protocol

import "testing"

func TestVersionName(t *testing.T) {
	for v, want := range map[int32]string{Version3011: "V3_0_11", Version498: "V4_9_8", 212: "V4_0_0_SNAPSHOT",
		441: "V5_1_4", 440: "V5_1_4_SNAPSHOT", 413: "V5_0_0", 611: "V5_9_9", 612: "612", 5: "5", -1: "-1"} {
		if got := VersionName(v); got != want {
			t.Errorf("VersionName(%d) = %q, want %q", v, got, want)
		}
	}
}
