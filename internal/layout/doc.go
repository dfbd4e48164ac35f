// Package layout holds the tests of the source tree's shape: files small
// enough to have one job each.
package layout
