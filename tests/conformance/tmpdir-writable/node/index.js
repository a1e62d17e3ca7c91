const fs = require('fs');
const os = require('os');
const path = require('path');

exports.handler = async () => {
  const file = path.join(os.tmpdir(), 'scratch.txt');
  fs.writeFileSync(file, 'scratch ✓', 'utf8');
  const readBack = fs.readFileSync(file, 'utf8');
  fs.unlinkSync(file);
  return { readBack, homeIsTmp: process.env.HOME === process.env.TMPDIR };
};
