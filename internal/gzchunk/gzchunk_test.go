package gzchunk

import (
	"bytes"
	"compress/gzip"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"testing"
)

// TestCombineIsTheCRCOfTheWhole: for texts of many lengths, the empty one
// included, combining the CRCs of two parts gives the CRC of both.
func TestCombineIsTheCRCOfTheWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 7, 8, 255, 4096, 100_003} {
		for _, m := range []int{0, 1, 5, 64, 70_001} {
			a, b := make([]byte, m), make([]byte, n)
			for i := range a {
				a[i] = byte(r.Uint32())
			}
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			want := crc32.ChecksumIEEE(append(bytes.Clone(a), b...))
			if got := combine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), n); got != want {
				t.Fatalf("len(A)=%d len(B)=%d: combined %08x, want %08x", m, n, got, want)
			}
		}
	}
}

// TestChunksReadAsOneGzipStream: chunks written in any order and any
// number of times, an empty one among them, read back with the standard
// library's reader (single member) as their texts in that order.
func TestChunksReadAsOneGzipStream(t *testing.T) {
	var c Compressor
	texts := [][]byte{[]byte("# TYPE a counter\n"), bytes.Repeat([]byte(`a{x="1"} 12\n`), 5000), nil, []byte("last 1\n")}
	var chunks []Chunk
	for _, text := range texts {
		chunks = append(chunks, c.Compress(text))
	}
	order := []int{0, 1, 2, 1, 3, 0}
	var in []Chunk
	var want []byte
	for _, i := range order {
		in = append(in, chunks[i])
		want = append(want, texts[i]...)
	}
	var out bytes.Buffer
	if err := Write(&out, in); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&out)
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes; want %d", len(got), len(want))
	}
	if rest, _ := io.ReadAll(&out); len(rest) != 0 {
		t.Fatalf("%d bytes after the gzip member", len(rest))
	}
}
