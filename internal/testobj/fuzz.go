package testobj

// FuzzBytes hands out the fuzzer's bytes as choices; 0 once they run out.
type FuzzBytes []byte

// Next is the next byte as a choice.
func (b *FuzzBytes) Next() int {
	if len(*b) == 0 {
		return 0
	}
	v := (*b)[0]
	*b = (*b)[1:]
	return int(v)
}

// Choose picks one of the options.
func Choose[T any](b *FuzzBytes, options ...T) T { return options[b.Next()%len(options)] }
