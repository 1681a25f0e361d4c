"""elmoc.train"""
