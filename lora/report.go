package lora

import (
	"fmt"
	"strconv"

	"github.com/tune-ml/tune/transformer"
)

// TrainableParameters counts parameters as PEFT's get_nb_trainable_parameters does: trainable is the number of
// trained values (adapters, modules_to_save, trained biases); all is every value of the model, with each
// modules_to_save module counted twice, because PEFT's ModulesToSaveWrapper keeps the original module beside its
// trained copy (bert-base with r 8 on query/value and a 2-label head: 296,450 of 109,780,228).
func (m *Model) TrainableParameters() (trainable, all int) {
	for _, np := range m.NamedParameters() {
		n := np.Value.Numel()
		all += n
		if np.Trainable {
			trainable += n
		}
		if m.savedModule(np.Name) != "" {
			all += n
		}
	}
	return trainable, all
}

// parameterCounter is a model that counts its own parameters (Model does, the PEFT way).
type parameterCounter interface {
	TrainableParameters() (trainable, all int)
}

// TrainableReport returns PEFT's print_trainable_parameters line for any model (a trainer.Model), e.g.
// "trainable params: 296,450 || all params: 109,780,228 || trainable%: 0.2700": counts from
// Model.TrainableParameters for an adapted model, else from NamedParameters; the percentage with 4 decimals.
// The trainer and the CLI print it when training starts.
func TrainableReport(m interface {
	NamedParameters() []transformer.NamedParam
}) string {
	var trainable, all int
	if c, ok := m.(parameterCounter); ok {
		trainable, all = c.TrainableParameters()
	} else {
		for _, np := range m.NamedParameters() {
			all += np.Value.Numel()
			if np.Trainable {
				trainable += np.Value.Numel()
			}
		}
	}
	return FormatTrainable(trainable, all)
}

// FormatTrainable formats counts as PEFT prints them: "trainable params: 1,234 || all params: 5,678 ||
// trainable%: 21.7324" (Python's {:,d} and {:.4f}); all = 0 gives a percentage of 0.
func FormatTrainable(trainable, all int) string {
	pct := 0.0
	if all > 0 {
		pct = 100 * float64(trainable) / float64(all)
	}
	return fmt.Sprintf("trainable params: %s || all params: %s || trainable%%: %.4f", thousands(trainable), thousands(all), pct)
}

// thousands formats n with a comma every three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
