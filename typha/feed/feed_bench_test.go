package feed

import (
	"testing"

	v1 "github.com/tabbynet/tabby/apis/v1"
)

// BenchmarkUpdateFullLog is one event into a log at its bound (10,000 events), as every event is
// once a replica has run a while under churn: the oldest event goes as the new one comes.
func BenchmarkUpdateFullLog(b *testing.B) {
	f := New(Config{Kind: v1.SchemeGroupVersion.WithKind("IPAMBlock")})
	if err := f.Replace(nil, "1"); err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		if err := f.Update(block("a", 2+i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := f.Update(block("a", 10002+i)); err != nil {
			b.Fatal(err)
		}
	}
}
