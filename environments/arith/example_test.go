package arith_test

import (
	"fmt"

	"github.com/rlpipe/rlpipe/environments/arith"
)

func ExampleHeldOut() {
	fmt.Println(arith.HeldOut(123, 456), arith.HeldOut(1, 5))
	// Output: false true
}

func ExampleSampler() {
	s := arith.NewSampler(1)
	for range 3 {
		p := s.Next()
		fmt.Println(p.ID(), p.Prompt(), p.Answer(), p.Split())
	}
	// Output:
	// arith-465+519 465+519= 984 train
	// arith-590+235 590+235= 825 train
	// arith-761+48 761+48= 809 train
}

func ExampleHeldOutSet() {
	for _, p := range arith.HeldOutSet(3) {
		fmt.Println(p.ID(), p.Split())
	}
	fmt.Println(arith.NumHeldOut(), "held-out problems")
	// Output:
	// arith-72+953 test
	// arith-287+935 test
	// arith-518+123 test
	// 100005 held-out problems
}
