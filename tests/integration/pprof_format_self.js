// Second pprof decoder for the export test: the npm package pprof-format.
// Usage: node pprof_format_self.js PPROF_FORMAT_DIR PROFILE.pb.gz
// Prints {"function name": self value of sample type 0} as JSON.
'use strict';
const fs = require('fs');
const zlib = require('zlib');
const { Profile } = require(process.argv[2]);

const profile = Profile.decode(zlib.gunzipSync(fs.readFileSync(process.argv[3])));
const strings = profile.stringTable.strings;
const functions = new Map(profile.function.map((f) => [String(f.id), strings[Number(f.name)]]));
const locations = new Map(profile.location.map((l) => [String(l.id), l]));
const self = {};
for (const sample of profile.sample) {
  const leaf = locations.get(String(sample.locationId[0]));
  // line[0] is the innermost (possibly inlined) function at this address.
  const name = functions.get(String(leaf.line[0].functionId));
  self[name] = (self[name] || 0) + Number(sample.value[0]);
}
console.log(JSON.stringify(self));
