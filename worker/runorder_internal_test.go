package worker

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// TestRunOrderLighterRunsWait: a run waits for the runs of its market more
// than orderRatio times (and minDensityGap) denser, until they have handed
// over their last save, and for a run still deciding until it knows its
// density; runs of similar density, of other markets or without alerts do
// not wait; a cancelled context ends a wait, and a run that ends releases
// its waiters.
func TestRunOrderLighterRunsWait(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var o runOrder
	type result struct {
		done   chan struct{}
		waited time.Duration
	}
	waitAsync := func(c context.Context, r *orderedRun) *result {
		res := &result{done: make(chan struct{})}
		go func() { res.waited = o.wait(c, r); close(res.done) }()
		return res
	}
	// blocked waits until a run waits for x (its density or its last
	// save), and fails if res's wait ends first.
	blocked := func(t *testing.T, x *orderedRun, res *result) {
		t.Helper()
		for x.waiters.Load() == 0 {
			select {
			case <-res.done:
				t.Fatal("the lighter run went on without waiting")
			case <-ctx.Done():
				t.Fatal("the lighter run never waited")
			default:
				runtime.Gosched()
			}
		}
		select {
		case <-res.done:
			t.Fatal("the lighter run went on without waiting")
		default:
		}
	}

	t.Run("a lighter run waits for a denser one's last save", func(t *testing.T) {
		heavy, light := o.begin(domain.Crypto), o.begin(domain.Crypto)
		defer o.end(heavy)
		defer o.end(light)
		heavy.setDensity(10)
		light.setDensity(4.9) // more than twice lighter
		res := waitAsync(ctx, light)
		if w := o.wait(ctx, heavy); w >= maxOrderWait {
			t.Errorf("the denser run waited %v", w)
		}
		blocked(t, heavy, res)
		heavy.scoredAll()
		<-res.done
	})

	t.Run("similar densities, tiny gaps, other markets and no alerts go side by side", func(t *testing.T) {
		a, b := o.begin(domain.Crypto), o.begin(domain.Crypto)
		s1, s2 := o.begin(domain.Stocks), o.begin(domain.Stocks)
		z1, z2 := o.begin(domain.Forex), o.begin(domain.Forex)
		x := o.begin(domain.Market("other"))
		for _, r := range []*orderedRun{a, b, s1, s2, z1, z2, x} {
			defer o.end(r)
		}
		a.setDensity(10)
		b.setDensity(5)    // exactly twice: side by side
		s1.setDensity(0.5) // denser, by less than minDensityGap
		s2.setDensity(0)
		z1.setDensity(0)
		z2.setDensity(0)
		x.setDensity(1000) // another market
		for _, r := range []*orderedRun{a, b, s1, s2, z1, z2} {
			// None hands over anything: a wait would last maxOrderWait.
			if w := o.wait(ctx, r); w >= maxOrderWait {
				t.Errorf("a run of %s (density %v) waited %v", r.market, r.density, w)
			}
		}
	})

	t.Run("a run still deciding is waited for, then only if denser", func(t *testing.T) {
		light := o.begin(domain.Crypto)
		defer o.end(light)
		light.setDensity(1)
		similar := o.begin(domain.Crypto)
		defer o.end(similar)
		res := waitAsync(ctx, light)
		blocked(t, similar, res) // for its density
		similar.setDensity(2)    // twice: not dense enough to go first
		<-res.done

		denser := o.begin(domain.Crypto)
		res = waitAsync(ctx, light)
		blocked(t, denser, res) // for its density
		denser.setDensity(100)
		blocked(t, denser, res) // now for its last save
		o.end(denser)           // it ends without handing over anything: its waiters go on
		<-res.done
	})

	t.Run("a cancelled context ends the wait", func(t *testing.T) {
		heavy, light := o.begin(domain.Crypto), o.begin(domain.Crypto)
		defer o.end(heavy)
		defer o.end(light)
		heavy.setDensity(10)
		light.setDensity(1)
		c, stop := context.WithCancel(ctx)
		res := waitAsync(c, light)
		blocked(t, heavy, res)
		stop()
		<-res.done
		if res.waited >= maxOrderWait {
			t.Errorf("the cancelled wait lasted %v", res.waited)
		}
	})

	t.Run("ended runs are forgotten", func(t *testing.T) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if len(o.runs) != 0 {
			t.Errorf("%d markets still hold runs", len(o.runs))
		}
	})
}
