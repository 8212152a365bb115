// The same package from an ES module: Node maps the import through package.json "exports".
import { EventType, register } from "@agent-network/bridge-ts";

console.log(typeof register, EventType.TEXT);
