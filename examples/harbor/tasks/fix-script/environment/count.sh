#!/bin/bash
# Prints the number of non-empty lines of the file $1.
n=$(grep -c -v '^$' "$1")
echo $((n + 1))
