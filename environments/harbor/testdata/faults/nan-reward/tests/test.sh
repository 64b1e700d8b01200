#!/bin/bash
echo NaN > /logs/verifier/reward.txt
