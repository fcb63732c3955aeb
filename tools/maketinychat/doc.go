// Command maketinychat writes the synthetic chat data of tune's embedded decoder default (recipes/tiny-chat.yaml):
// short question-and-answer conversations in TRL's {"messages": [...]} JSONL format, deterministic from a seed.
//
//	go run ./tools/maketinychat -out recipes/data/tiny-chat
//
// Files written into -out: train.jsonl (1200 conversations) and dev.jsonl (100, none of them in train), and
// text.jsonl (1200 lines {"text": "Q: ... A: ..."} of the same exchanges, for base models). The
// questions ask the colour of a fruit, the sum of two digits, or the opposite of a word; each answer repeats
// the question's words in a fixed pattern ("A lime is green."), so a small model learns them in a minute.
package main
