package filter

import (
	"testing"
)

// benchProps is a stored message's properties string (name\x01value pairs
// joined by \x02): 10 properties, user and system.
var benchProps = []byte("KEYS\x01order-1842\x02TAGS\x01TagA\x02UNIQ_KEY\x017F0000010001B4AA\x02WAIT\x01true\x02" +
	"amount\x0172\x02region\x01eu\x02currency\x01EUR\x02customer\x01c-88812\x02channel\x01web\x02priority\x015")

// lookupProps looks a name up in a properties string without allocating,
// as the broker does over a stored record.
func lookupProps(p []byte) Lookup {
	return func(name string) ([]byte, bool) { return lookupProperty(p, name) }
}

// BenchmarkMatch is the cost per message of a 3-clause expression over 10
// properties (goal: no allocation).
func BenchmarkMatch(b *testing.B) {
	for _, bc := range []struct{ name, expr string }{
		{"match", "amount BETWEEN 50 AND 99 AND region IN ('eu', 'us') AND priority > 3.5"},
		{"nomatch", "amount BETWEEN 50 AND 99 AND region IN ('eu', 'us') AND priority > 7"},
	} {
		e, err := Compile(bc.expr)
		if err != nil {
			b.Fatal(err)
		}
		want := bc.name == "match"
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if e.Match(lookupProps(benchProps)) != want {
					b.Fatal("wrong result")
				}
			}
		})
		b.Run(bc.name+"/properties", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if e.MatchProperties(benchProps) != want {
					b.Fatal("wrong result")
				}
			}
		})
	}
}

// TestMatch_NoAllocs keeps Match allocation-free (the benchmark's goal).
func TestMatch_NoAllocs(t *testing.T) {
	e, err := Compile("amount BETWEEN 50 AND 99 AND region IN ('eu', 'us') AND priority > 3.5 AND amount <> 1 AND customer = 'c-88812'")
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if !e.Match(lookupProps(benchProps)) {
			t.Fatal("no match")
		}
	}); n != 0 {
		t.Fatalf("Match allocates %.1f times per message", n)
	}
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile("amount BETWEEN 50 AND 99 AND region IN ('eu', 'us') AND priority > 3.5"); err != nil {
			b.Fatal(err)
		}
	}
}
