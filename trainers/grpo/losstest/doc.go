// Package losstest is the suite every policy loss of trainers/grpo runs:
// what grpo.Loss promises whatever its policy term (finite figures and
// gradients, zero advantages give a zero policy loss, at ratio 1 every
// token's gradient is the policy gradient −A·w, tokens out of the mask
// count nowhere). A loss's own test adds its hand-worked numbers.
package losstest
