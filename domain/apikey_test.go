package domain

import (
	"strings"
	"testing"
)

func TestNewKeyFormat(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 200 {
		k, err := NewKey()
		if err != nil {
			t.Fatal(err)
		}
		if len(k) != KeyLen || !strings.HasPrefix(k, KeyPrefix) {
			t.Fatalf("key %q: len %d, want %d with prefix %s", k, len(k), KeyLen, KeyPrefix)
		}
		if !CheckKeyFormat(k) {
			t.Fatalf("fresh key %q fails its own checksum", k)
		}
		if seen[k] {
			t.Fatalf("duplicate key %q", k)
		}
		seen[k] = true
	}
}

func TestCheckKeyFormatRejects(t *testing.T) {
	t.Parallel()
	k, _ := NewKey()
	flip := func(i int) string {
		b := []byte(k)
		if b[i] == 'a' {
			b[i] = 'b'
		} else {
			b[i] = 'a'
		}
		return string(b)
	}
	for name, bad := range map[string]string{
		"empty":          "",
		"no prefix":      "xsk_" + k[4:],
		"short":          k[:len(k)-1],
		"long":           k + "a",
		"bad char":       k[:10] + "-" + k[11:],
		"body typo":      flip(10),
		"checksum typo":  flip(len(k) - 1),
		"lower prefix":   strings.ToUpper(k[:4]) + k[4:],
		"whitespace":     " " + k[1:],
		"non-ascii body": k[:20] + "é" + k[22:],
	} {
		if CheckKeyFormat(bad) {
			t.Errorf("%s: CheckKeyFormat(%q) = true", name, bad)
		}
	}
}

func TestHashKey(t *testing.T) {
	t.Parallel()
	// SHA-256("abc") is the FIPS 180-2 test vector.
	if got, want := HashKey("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Fatalf("HashKey(abc) = %s, want %s", got, want)
	}
	if !KeyHashEqual(HashKey("x"), HashKey("x")) || KeyHashEqual(HashKey("x"), HashKey("y")) {
		t.Fatal("KeyHashEqual wrong")
	}
	k, _ := NewKey()
	if p := KeyDisplayPrefix(k); len(p) != KeyDisplayLen || !strings.HasPrefix(k, p) {
		t.Fatalf("display prefix %q of %q", p, k)
	}
}

func FuzzCheckKeyFormat(f *testing.F) {
	k, _ := NewKey()
	f.Add(k)
	f.Add("msk_")
	f.Fuzz(func(t *testing.T, s string) {
		if CheckKeyFormat(s) && (len(s) != KeyLen || !strings.HasPrefix(s, KeyPrefix)) {
			t.Fatalf("accepted %q", s)
		}
	})
}

func BenchmarkCheckKeyFormat(b *testing.B) {
	k, _ := NewKey()
	b.ReportAllocs()
	for b.Loop() {
		if !CheckKeyFormat(k) {
			b.Fatal("rejected")
		}
	}
}
