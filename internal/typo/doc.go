// Package typo finds the name a user most likely meant: the candidate nearest to a misspelt key, flag or
// module name by edit distance, for "did you mean …?" hints.
package typo
