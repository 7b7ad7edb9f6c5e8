package test

// The stand-in's Gemini API and the official @google/genai SDK agree,
// without the gateway: client.js, as the agents run it, against the
// stand-in on loopback with the operator's key.

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/test/standin"
)

// TestGeminiSDKAgainstTheStandin runs client.js's Gemini payloads, whole
// and streamed, straight at the stand-in: the SDK gets the text and every
// count of the usage, the stand-in's ledger says the same in flock's
// terms, and a wrong key is raised by the SDK with Google's status.
//
// Tier: node and npm (the SDK from the npm registry), as the model
// gateway's; no root, no machine.
func TestGeminiSDKAgainstTheStandin(t *testing.T) {
	harness.RuntimesTier.Require(t)
	clients := stageModelClients(t)
	// 20 words of prompt and 10 of the cache it names; 5 words of answer
	// and 10 of thinking.
	usage := `"usage":{"cachedContentTokenCount":10,"candidatesTokenCount":5,"promptTokenCount":30,"promptTokensDetails":[{"modality":"TEXT","tokenCount":30}],"thoughtsTokenCount":10,"totalTokenCount":45}`
	for _, tc := range []struct {
		name, payload, key string
		want               []string // in stdout, or stderr when failing
		seen               string
		reported           standin.Usage
	}{
		{"whole", "gemini: " + twentyWords, geminiKey, []string{`"text":"word0 word1 word2 word3 word4"`, usage},
			"POST /v1/models/gemini-standin:generateContent", standin.Usage{Requests: 1, Input: 20, CacheRead: 10, Output: 15}},
		{"streamed", "gemini stream: " + twentyWords, geminiKey, []string{`"text":"word0 word1 word2 word3 word4"`, usage},
			"POST /v1/models/gemini-standin:streamGenerateContent", standin.Usage{Requests: 1, Input: 20, CacheRead: 10, Output: 15}},
		{"a wrong key", "gemini: " + twentyWords, "AIza-wrong", []string{"401", "API key not valid", "UNAUTHENTICATED"},
			"POST /v1/models/gemini-standin:generateContent", standin.Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &standin.Server{GeminiKey: geminiKey}
			up := httptest.NewServer(s)
			defer up.Close()
			cmd := exec.Command("node", filepath.Join(clients, "client.js"))
			// Only what flock gives an agent: none of this host's own.
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
				"GOOGLE_GEMINI_BASE_URL=" + up.URL, "GEMINI_API_KEY=" + tc.key}
			cmd.Stdin = strings.NewReader(tc.payload)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			out := stdout.String()
			if tc.key != geminiKey {
				out = stderr.String()
			}
			for _, want := range tc.want {
				if (err == nil) != (tc.key == geminiKey) || !strings.Contains(out, want) {
					t.Errorf("%q: %v\nstdout %s\nstderr %s\nwant %s", tc.payload, err, stdout.String(), stderr.String(), want)
				}
			}
			if seen := s.Seen(); !slices.Equal(seen, []string{tc.seen}) {
				t.Errorf("the stand-in saw %q, want %q", seen, tc.seen)
			}
			if got := s.Reported(""); got != tc.reported {
				t.Errorf("the stand-in reported %+v, want %+v", got, tc.reported)
			}
			t.Logf("%s: %s", tc.name, strings.TrimSpace(out))
		})
	}
}
