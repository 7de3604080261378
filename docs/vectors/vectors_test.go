package vectors_test

import (
	"testing"

	"github.com/marketscreener/market/docs/vectors"
	"github.com/marketscreener/market/domain/analytics"
)

func TestEveryVersionIsPublished(t *testing.T) {
	t.Parallel()
	published, err := vectors.Published()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range analytics.Versions {
		m, ok := published[v.Name]
		if !ok {
			t.Errorf("model version %s has no docs/vectors/%[1]s/methodology.json", v.Name)
			continue
		}
		if m.Fingerprint != v.Fingerprint || m.Rules.Fingerprint() != v.Fingerprint {
			t.Errorf("docs/vectors/%s/methodology.json: fingerprint %s, rules hash to %s, version pins %s",
				v.Name, m.Fingerprint, m.Rules.Fingerprint(), v.Fingerprint)
		}
	}
	methods, err := analytics.Methodology(published)
	if err != nil || len(methods) != len(analytics.Versions) {
		t.Fatalf("Methodology = %d versions, %v", len(methods), err)
	}
}
