"""elmoc.features"""
