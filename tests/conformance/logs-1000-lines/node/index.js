exports.handler = async () => {
  for (let i = 0; i < 1000; i++) {
    console.log(`thousand-line-${String(i).padStart(4, '0')} ✓`);
  }
  process.stdout.write('tail-without-newline');
  return 'printed';
};
