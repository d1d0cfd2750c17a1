#!/bin/bash
# the "test" that hangs: sleeps in a function the stacks should show
sleep "$1"
