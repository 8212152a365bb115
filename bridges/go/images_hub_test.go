package agentnet_test

import (
	"bytes"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
)

// A Go participant sends images with a text (by URL and inline) and reads
// them back on the other side; the hub refuses a malformed one.
func TestImagesInEnvelopes(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 30*time.Second)
	h := testhub.Start(t)
	a := newParticipant(t, ctx, h.Addr, "alice", agentnet.ConnectOptions{AutoAck: true})
	b := newParticipant(t, ctx, h.Addr, "bob", agentnet.ConnectOptions{AutoAck: true})
	conv, err := a.c.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{"bob"}, WaitUntilOpened: true})
	if err != nil {
		t.Fatal(err)
	}
	ch := conv.Channel.GetChannelId()
	png := []byte("\x89PNG\r\n\x1a\nfake")
	sent := []agentnet.Image{
		{URL: "https://example.com/cat.png", Detail: "low"},
		{Data: png, MediaType: "image/png"},
	}
	if _, err := a.c.PostText(ctx, ch, "look", agentnet.WithImages(sent...)); err != nil {
		t.Fatal(err)
	}
	got := b.next(t, ctx, "the text", func(e *agentnet.Envelope) bool { return e.ChannelID == ch && e.EventType == agentnet.EventText })
	images := got.Images()
	if got.Text() != "look" || len(images) != 2 {
		t.Fatalf("got %q with %d images", got.Text(), len(images))
	}
	if images[0].URL != sent[0].URL || images[0].Detail != "low" || !bytes.Equal(images[1].Data, png) || images[1].MediaType != "image/png" {
		t.Fatalf("images %+v, want %+v", images, sent)
	}
	_, err = a.c.PostText(ctx, ch, "bad", agentnet.WithImages(agentnet.Image{Data: png}))
	if !agentnet.IsReason(err, agentnet.ReasonInvalidArgument) {
		t.Fatalf("an inline image without a media type: %v, want INVALID_ARGUMENT", err)
	}
}
