// Package gzchunk writes a gzip stream out of separately compressed chunks
// of text, so that a chunk whose text has not changed since the last write
// is written again as it was compressed then, not compressed anew.
//
// Each chunk is a run of deflate blocks compressed from a fresh state (no
// reference back into another chunk) and ended by a sync flush, which
// leaves it byte-aligned and not final. Any sequence of such chunks, then
// one final empty block, is one valid deflate stream; the gzip trailer's
// CRC-32 of the whole text is combined from the chunks' own. The result is
// a single gzip member, as any reader expects.
package gzchunk

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/flate"
)

// Chunk is one chunk of text, compressed.
type Chunk struct {
	deflated []byte
	crc      uint32 // CRC-32 (IEEE) of the text
	size     int    // the text's length
}

// Compressor compresses chunks, reusing one deflate state.
type Compressor struct {
	buf bytes.Buffer
	fw  *flate.Writer
}

// Compress returns text compressed as a chunk.
func (c *Compressor) Compress(text []byte) Chunk {
	c.buf.Reset()
	if c.fw == nil {
		c.fw, _ = flate.NewWriter(&c.buf, flate.BestSpeed) // BestSpeed is a valid level
	} else {
		c.fw.Reset(&c.buf)
	}
	// Writes to a bytes.Buffer do not fail.
	_, _ = c.fw.Write(text)
	_ = c.fw.Flush()
	return Chunk{deflated: bytes.Clone(c.buf.Bytes()), crc: crc32.ChecksumIEEE(text), size: len(text)}
}

// Size is the chunk's compressed size.
func (c Chunk) Size() int { return len(c.deflated) }

// header is a gzip member's header: deflate, no flags, no time, unknown OS.
var header = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}

// finalBlock is an empty final block: BFINAL 1, fixed codes, end of block.
var finalBlock = []byte{0x03, 0x00}

// Write writes chunks as one gzip member.
func Write(w io.Writer, chunks []Chunk) error {
	if _, err := w.Write(header); err != nil {
		return err
	}
	var crc uint32
	var size int
	for _, c := range chunks {
		if _, err := w.Write(c.deflated); err != nil {
			return err
		}
		crc = combine(crc, c.crc, c.size)
		size += c.size
	}
	var trailer [8]byte
	binary.LittleEndian.PutUint32(trailer[:4], crc)
	binary.LittleEndian.PutUint32(trailer[4:], uint32(size)) // the length modulo 2^32, as gzip keeps it
	if _, err := w.Write(finalBlock); err != nil {
		return err
	}
	_, err := w.Write(trailer[:])
	return err
}

// The CRC-32 of a text A followed by B, from A's and B's: in the bit-reversed
// representation CRC-32 uses, crc(AB) = crc(A)·x^(8·len(B)) + crc(B), modulo
// the CRC's polynomial (the initial and final inversions cancel out).

// poly is CRC-32's polynomial, bit-reversed: bit 31 is x^0.
const poly = 0xedb88320

// one is the polynomial 1 (x^0) in that representation.
const one = 1 << 31

// mulmod returns a·b modulo poly.
func mulmod(a, b uint32) uint32 {
	var p uint32
	for m := uint32(one); m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		// b times x.
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

// powers[k] is x^(2^k) modulo poly.
var powers = func() (t [64]uint32) {
	t[0] = one >> 1 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = mulmod(t[k-1], t[k-1])
	}
	return t
}()

// shift returns x^(8·n) modulo poly: the factor n bytes after a CRC move it.
func shift(n int) uint32 {
	p := uint32(one)
	for k := 3; n > 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = mulmod(powers[k], p)
		}
	}
	return p
}

// combine returns the CRC-32 of A then B from crcA, crcB and B's length.
func combine(crcA, crcB uint32, lenB int) uint32 {
	return mulmod(shift(lenB), crcA) ^ crcB
}
