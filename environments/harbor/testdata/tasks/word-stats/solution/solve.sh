#!/bin/bash
wc -l < "$DATA_DIR/text.txt" > /app/lines.txt
wc -w < "$DATA_DIR/text.txt" > /app/words.txt
