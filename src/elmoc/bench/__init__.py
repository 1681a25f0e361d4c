"""elmoc.bench"""
