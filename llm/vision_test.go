package llm_test

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// The doctor's probe says whether the model takes images: a fake that
// accepts them is "yes", one that answers a picture with 400 is "no".
func TestProbeSaysWhetherTheModelTakesImages(t *testing.T) {
	for _, c := range []struct {
		provider string
		refuse   bool
		want     string
	}{
		{"openai", false, "yes"}, {"openai", true, "no: the model refused an image"},
		{"anthropic", false, "yes"}, {"anthropic", true, "no: the model refused an image"},
	} {
		t.Run(c.provider+map[bool]string{true: " refusing", false: ""}[c.refuse], func(t *testing.T) {
			var url string
			if c.provider == "openai" {
				s := llmtest.NewOpenAIServer(t)
				s.SetRefuseImages(c.refuse)
				url = s.URL
			} else {
				s := llmtest.NewAnthropicServer(t)
				s.SetRefuseImages(c.refuse)
				url = s.URL
			}
			res, err := llm.ProbeEnv(context.Background(), env(map[string]string{
				"MARLOWE_MODEL_PROVIDER": c.provider, "MARLOWE_MODEL": "m", "MARLOWE_MODEL_BASE_URL": url,
			}))
			if err != nil || len(res) != 1 || !res[0].OK() {
				t.Fatalf("%+v %v", res, err)
			}
			if !strings.HasPrefix(res[0].Images, c.want) || res[0].TakesImages() != !c.refuse {
				t.Errorf("images %q, want %q", res[0].Images, c.want)
			}
		})
	}
}

// A user turn's images reach the model as image parts: OpenAI image_url
// data URLs, Anthropic base64 image blocks, bytes intact.
func TestImagePartsReachTheModel(t *testing.T) {
	var b bytes.Buffer
	_ = png.Encode(&b, image.NewGray(image.Rect(0, 0, 4, 3)))
	v := core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "what is wrong here?",
		Images: []core.ImagePart{{Type: "image/png", Data: b.Bytes()}}}}}

	oa := llmtest.NewOpenAIServer(t)
	m, _, _, err := llm.FromEnv(env(map[string]string{"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "m", "MARLOWE_MODEL_BASE_URL": oa.URL}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	reqs, _ := oa.ChatRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	last := reqs[0].Messages[len(reqs[0].Messages)-1]
	if im := last.Images(); len(im) != 1 || im[0].Type != "image/png" || !bytes.Equal(im[0].Data, b.Bytes()) || last.Text() != "what is wrong here?" {
		t.Errorf("openai got %+v text %q", im, last.Text())
	}

	an := llmtest.NewAnthropicServer(t)
	m, _, _, err = llm.FromEnv(env(map[string]string{"MARLOWE_MODEL_PROVIDER": "anthropic", "MARLOWE_MODEL": "m", "MARLOWE_MODEL_BASE_URL": an.URL}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	areqs, _ := an.MessageRequests()
	if len(areqs) != 1 {
		t.Fatalf("%d requests", len(areqs))
	}
	msgs := areqs[0].Messages
	if im := msgs[len(msgs)-1].Images(); len(im) != 1 || im[0].Type != "image/png" || !bytes.Equal(im[0].Data, b.Bytes()) {
		t.Errorf("anthropic got %+v", im)
	}
}
