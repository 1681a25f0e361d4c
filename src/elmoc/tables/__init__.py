"""elmoc.tables"""
