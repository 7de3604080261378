package domain

import "strings"

// SandboxKeyPrefix starts a sandbox key ("msk_test_" + the same body and
// checksum as a live key). A sandbox key reads the sandbox's synthetic
// data, never counts against the monthly quota, and may push test events;
// a live key never reaches sandbox data, nor a sandbox key live data.
const SandboxKeyPrefix = "msk_test_"

// Sandbox reports whether k is a sandbox key (its stored prefix says so).
func (k *APIKey) Sandbox() bool { return strings.HasPrefix(k.Prefix, SandboxKeyPrefix) }
