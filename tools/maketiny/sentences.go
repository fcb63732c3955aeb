package main

import (
	"math/rand/v2"
	"strings"
)

// The word lists of the synthetic sentiment task. Adjectives carry the sentiment; a negator in front flips it;
// in a contrast ("..., but ...", "although ..., ...") the second clause decides. Everything else is filler.
var (
	positive = []string{"good", "great", "wonderful", "brilliant", "charming", "delightful", "moving", "funny",
		"clever", "beautiful", "superb", "excellent", "enjoyable", "fresh", "gripping"}
	negative = []string{"bad", "awful", "boring", "dull", "terrible", "weak", "clumsy", "tedious", "bland",
		"messy", "forgettable", "predictable", "painful", "lifeless", "silly"}

	// Subjects with their verb. Plural nouns are left out of the vocabulary so they split into stem + "##s".
	subjects = []subject{
		{"the movie", "was"}, {"this film", "was"}, {"the plot", "was"}, {"the acting", "was"},
		{"the story", "was"}, {"the ending", "was"}, {"the cast", "was"}, {"the script", "was"},
		{"the music", "was"}, {"the dialogue", "was"}, {"the pacing", "was"}, {"the sequel", "is"},
		{"the actors", "were"}, {"the jokes", "were"}, {"the scenes", "were"}, {"the characters", "were"},
		{"the effects", "were"}, {"her performance", "was"}, {"his direction", "was"}, {"the soundtrack", "is"},
	}
	// Intensifiers; the -ly adverbs are not in the vocabulary and split into stem + "##ly".
	intensifiers = []string{"", "", "", "very ", "really ", "quite ", "rather ", "so ", "pretty ",
		"extremely ", "completely ", "surprisingly "}
	negators    = []string{"not ", "never ", "hardly ", "not at all "}
	nouns       = []string{"movie", "film", "story", "ride", "evening", "debut"}
	distractors = []string{"we watched it on sunday", "I saw it with my sister", "it runs about two hours",
		"my friend picked it", "the theater was full", "it came out last year", "we had popcorn",
		"I went in without reading reviews", "the tickets were cheap", "it was raining outside"}
)

type subject struct{ noun, verb string }

// templates are the sentence shapes with their share of the data (weights sum to 100).
var templates = []struct {
	weight int
	make   func(r *rand.Rand) (string, int)
}{
	{33, plain},
	{20, negated},
	{7, foundPlain},
	{4, foundNegated},
	{10, contrastBut},
	{5, contrastAlthough},
	{5, agreeingAnd},
	{6, whatA},
	{3, nothingAbout},
	{7, withDistractor},
}

// sentence draws one sentence and its label (1 positive, 0 negative).
func sentence(r *rand.Rand) (string, int) {
	n := r.IntN(100)
	for _, t := range templates {
		if n < t.weight {
			s, y := t.make(r)
			return capitalize(s), y
		}
		n -= t.weight
	}
	panic("maketiny: template weights do not sum to 100")
}

// adjective draws an adjective and its polarity (1 positive, 0 negative).
func adjective(r *rand.Rand) (string, int) {
	if r.IntN(2) == 1 {
		return pick(r, positive), 1
	}
	return pick(r, negative), 0
}

// opposite draws an adjective of the other polarity than y.
func opposite(r *rand.Rand, y int) string {
	if y == 1 {
		return pick(r, negative)
	}
	return pick(r, positive)
}

// "The movie was very good." → the adjective's polarity.
func plain(r *rand.Rand) (string, int) {
	s := pick(r, subjects)
	a, y := adjective(r)
	return s.noun + " " + s.verb + " " + pick(r, intensifiers) + a + ".", y
}

// "The movie was not very good." → flipped.
func negated(r *rand.Rand) (string, int) {
	s := pick(r, subjects)
	a, y := adjective(r)
	return s.noun + " " + s.verb + " " + pick(r, negators) + pick(r, intensifiers) + a + ".", 1 - y
}

// "I found the plot clever." → the adjective's polarity.
func foundPlain(r *rand.Rand) (string, int) {
	s := pick(r, subjects)
	a, y := adjective(r)
	return "I found " + s.noun + " " + pick(r, intensifiers) + a + ".", y
}

// "I did not find the plot clever." → flipped.
func foundNegated(r *rand.Rand) (string, int) {
	s := pick(r, subjects)
	a, y := adjective(r)
	return "I did not find " + s.noun + " " + pick(r, intensifiers) + a + ".", 1 - y
}

// "The acting was dull, but the music was wonderful." → the second clause (the first is usually opposite).
func contrastBut(r *rand.Rand) (string, int) {
	s1, s2 := twoSubjects(r)
	a2, y := adjective(r)
	a1 := opposite(r, y)
	if r.IntN(4) == 0 {
		a1, _ = adjective(r)
	}
	return s1.noun + " " + s1.verb + " " + a1 + ", but " + s2.noun + " " + s2.verb + " " + pick(r, intensifiers) + a2 + ".", y
}

// "Although the plot was clever, the ending was weak." → the main (second) clause.
func contrastAlthough(r *rand.Rand) (string, int) {
	s1, s2 := twoSubjects(r)
	a2, y := adjective(r)
	return "although " + s1.noun + " " + s1.verb + " " + opposite(r, y) + ", " + s2.noun + " " + s2.verb + " " +
		pick(r, intensifiers) + a2 + ".", y
}

// "The cast was funny, and the script was clever." → both clauses agree.
func agreeingAnd(r *rand.Rand) (string, int) {
	s1, s2 := twoSubjects(r)
	a1, y := adjective(r)
	a2 := pick(r, negative)
	if y == 1 {
		a2 = pick(r, positive)
	}
	return s1.noun + " " + s1.verb + " " + a1 + ", and " + s2.noun + " " + s2.verb + " " + a2 + ".", y
}

// "What a charming film!" → the adjective's polarity.
func whatA(r *rand.Rand) (string, int) {
	a, y := adjective(r)
	article := "a "
	if strings.ContainsRune("aeiou", rune(a[0])) {
		article = "an "
	}
	return "what " + article + a + " " + pick(r, nouns) + "!", y
}

// "Nothing about the script was clever." → flipped.
func nothingAbout(r *rand.Rand) (string, int) {
	s := pick(r, subjects)
	a, y := adjective(r)
	return "nothing about " + s.noun + " was " + a + ".", 1 - y
}

// "We had popcorn, and the movie was not bad." → the inner sentence; the clause adds nothing.
func withDistractor(r *rand.Rand) (string, int) {
	var inner string
	var y int
	if r.IntN(2) == 0 {
		inner, y = plain(r)
	} else {
		inner, y = negated(r)
	}
	inner = strings.TrimSuffix(inner, ".")
	if r.IntN(2) == 0 {
		return pick(r, distractors) + ", and " + inner + ".", y
	}
	return inner + "; " + pick(r, distractors) + ".", y
}

func twoSubjects(r *rand.Rand) (subject, subject) {
	s1 := pick(r, subjects)
	s2 := pick(r, subjects)
	for s2 == s1 {
		s2 = pick(r, subjects)
	}
	return s1, s2
}

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

func capitalize(s string) string { return strings.ToUpper(s[:1]) + s[1:] }
