# A bare ASGI app that speaks OpenEnv's /ws frames (no openenv import, so
# uvicorn serves it in about a second): the serve: supervisor's faults.
# A step with {"message": "die"} kills the process; other steps echo and
# end the episode.
import json
import os


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "http":
        await receive()
        if scope["path"] == "/health":
            body = b'{"status":"healthy"}'
        elif scope["path"] == "/schema":
            body = json.dumps({"action": {"type": "object", "properties": {"message": {"type": "string"}},
                                          "required": ["message"], "additionalProperties": False}}).encode()
        else:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"not found"})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        while True:
            msg = await receive()
            if msg["type"] == "websocket.disconnect":
                return
            f = json.loads(msg["text"])
            if f["type"] == "close":
                await send({"type": "websocket.close", "code": 1000})
                return
            if f["type"] == "step" and f["data"]["message"] == "die":
                print("dying on purpose", flush=True)
                os._exit(3)
            text = "ready" if f["type"] == "reset" else f["data"]["message"]
            out = {"observation": {"text": text}, "reward": None, "done": f["type"] == "step"}
            await send({"type": "websocket.send", "text": json.dumps({"type": "observation", "data": out})})
