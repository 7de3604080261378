package worker

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// TestRunOrderLighterRunsWait: a run waits for the runs of its market more
// than orderRatio times denser, until they have handed over their last
// save (and for a run still deciding, until it knows its density); runs of
// similar density, of other markets or without alerts do not wait; a
// cancelled context ends a wait.
func TestRunOrderLighterRunsWait(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var o runOrder
	waitAsync := func(r *orderedRun) <-chan struct{} {
		done := make(chan struct{})
		go func() { o.wait(ctx, r); close(done) }()
		return done
	}

	t.Run("a lighter run waits for a denser one's last save", func(t *testing.T) {
		heavy, light := o.begin(domain.Crypto), o.begin(domain.Crypto)
		defer o.end(heavy)
		defer o.end(light)
		heavy.setDensity(10)
		light.setDensity(4.9) // more than twice lighter
		done := waitAsync(light)
		if w := o.wait(ctx, heavy); w >= maxOrderWait {
			t.Errorf("the denser run waited %v", w)
		}
		for heavy.waiters.Load() == 0 { // the lighter run waits for it (or never does: the test's deadline)
			select {
			case <-done:
				t.Fatal("the lighter run went on before the denser one had handed over its last save")
			case <-ctx.Done():
				t.Fatal("the lighter run never waited for the denser one")
			default:
				runtime.Gosched()
			}
		}
		select {
		case <-done:
			t.Fatal("the lighter run went on before the denser one had handed over its last save")
		default:
		}
		heavy.scoredAll()
		<-done
	})

	t.Run("similar densities, other markets and no alerts go side by side", func(t *testing.T) {
		a, b := o.begin(domain.Crypto), o.begin(domain.Crypto)
		s := o.begin(domain.Stocks)
		z1, z2 := o.begin(domain.Forex), o.begin(domain.Forex)
		for _, r := range []*orderedRun{a, b, s, z1, z2} {
			defer o.end(r)
		}
		a.setDensity(10)
		b.setDensity(5) // exactly twice: side by side
		s.setDensity(0)
		z1.setDensity(0)
		z2.setDensity(0)
		for _, r := range []*orderedRun{a, b, s, z1, z2} {
			// None hands over anything: a wait would last maxOrderWait.
			if w := o.wait(ctx, r); w >= maxOrderWait {
				t.Errorf("a run of %s (density %v) waited %v", r.market, r.density, w)
			}
		}
	})

	t.Run("a run still deciding is waited for, then only if denser", func(t *testing.T) {
		light, deciding := o.begin(domain.Crypto), o.begin(domain.Crypto)
		defer o.end(light)
		defer o.end(deciding)
		light.setDensity(1)
		var w time.Duration
		done := make(chan struct{})
		go func() { w = o.wait(ctx, light); close(done) }()
		deciding.setDensity(2) // twice: not denser enough to go first
		<-done
		if w >= maxOrderWait {
			t.Errorf("the run waited %v for one of similar density", w)
		}
		slow := o.begin(domain.Crypto)
		released := waitAsync(light)
		slow.setDensity(100)
		o.end(slow) // it ends without handing over anything: its waiters go on
		<-released
	})

	t.Run("a cancelled context ends the wait", func(t *testing.T) {
		heavy, light := o.begin(domain.Crypto), o.begin(domain.Crypto)
		defer o.end(heavy)
		defer o.end(light)
		heavy.setDensity(10)
		light.setDensity(1)
		c, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { o.wait(c, light); close(done) }()
		stop()
		<-done
	})

	t.Run("ended runs are forgotten", func(t *testing.T) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if len(o.runs) != 0 {
			t.Errorf("%d markets still hold runs", len(o.runs))
		}
	})
}
