fn main() {
    println!("ckptspec");
}
