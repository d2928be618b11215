package core

// Test hooks for package core_test.

// SamplePayload is a minimal payload of kind k.
var SamplePayload = samplePayload
