"""Spark jobs: thin I/O shells around the pure transforms; the SparkSession is passed in."""
