#!/bin/bash
sed -i 's|echo \$((n + 1))|echo "$n"|' /app/count.sh
