#!/bin/bash
# Runs the agent's script on the tests' own files (never the agent's) from a
# copy in /tmp: the world is read-only here.
score=0
cp /app/count.sh /tmp/count.sh 2>/dev/null
if [ "$(bash /tmp/count.sh /tests/three.txt 2>/dev/null)" = "3" ] && [ "$(bash /tmp/count.sh /tests/none.txt 2>/dev/null)" = "0" ]; then
  score=1
fi
echo "$score" > /logs/verifier/reward.txt
