"""Framework adapters, each in its own module behind its own extra.

    replyguard.adapters.pydantic_ai    pip install 'replyguard[pydantic-ai]'
    replyguard.adapters.openai_agents  pip install 'replyguard[openai-agents]'
    replyguard.adapters.langchain      pip install 'replyguard[langchain]'

This package imports no framework: each module imports its own when it is imported, and says
which extra to install when the framework is missing.
"""
