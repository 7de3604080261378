package worker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// A score:assets payload that cannot be read, or names no market or
// style we score, is final for both the handler (asynq.SkipRetry: a retry
// reads the same bytes) and the gate, which lets the task through without
// a lock for the handler to reject.
func TestScoreAssetsPayloadRejectsWhatARetryCannotMend(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":      `{`,
		"no style":      `{"market":"crypto"}`,
		"unknown style": `{"market":"crypto","style":"weekly"}`,
		"bad market":    `{"market":"bonds","style":"swing"}`,
	} {
		task := asynq.NewTask(TypeScoreAssets, []byte(body))
		_, err := scoreAssetsPayload(task)
		if !errors.Is(err, asynq.SkipRetry) || !strings.Contains(err.Error(), TypeScoreAssets) {
			t.Errorf("%s: %v, want a final error naming the task type", name, err)
		}
		tr := &ScoreTrigger{}
		ctx, release, err := tr.gate(context.Background(), task)
		if err != nil || ctx == nil || release == nil {
			t.Errorf("%s: the gate returned %v, %v; want the task let through ungated", name, ctx, err)
		} else {
			release()
		}
		if err := tr.HandleScoreAssets(context.Background(), task); !errors.Is(err, asynq.SkipRetry) {
			t.Errorf("%s: the handler returned %v, want asynq.SkipRetry", name, err)
		}
	}
	p, err := scoreAssetsPayload(asynq.NewTask(TypeScoreAssets, []byte(`{"market":"crypto","style":"swing"}`)))
	if err != nil || p.Market != domain.Crypto || p.Style != analytics.Style("swing") {
		t.Fatalf("a good payload: %+v, %v", p, err)
	}
}
